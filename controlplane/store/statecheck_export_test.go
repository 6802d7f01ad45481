package store

import "context"

// SetStateChunking sets the full state check's journal chunk and the
// block its workers take (tests of the chunk boundaries); the returned
// function restores them.
func SetStateChunking(chunk, block int) (restore func()) {
	oldChunk, oldBlock := stateChunk, parallelBlock
	stateChunk, parallelBlock = chunk, block
	return func() { stateChunk, parallelBlock = oldChunk, oldBlock }
}

// CheckAllPrescanned is CheckState(ctx, CheckAll) reading the state as
// CheckAllFrom does (every prefix at once, while the journal is read).
func (s *Store) CheckAllPrescanned(ctx context.Context) (*StateReport, error) {
	return s.checkAllFrom(ctx, s.readJournalLeaves, true)
}
