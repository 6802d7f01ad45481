package store

// SetStateChunking sets the full state check's journal chunk and the
// block its workers take (tests of the chunk boundaries); the returned
// function restores them.
func SetStateChunking(chunk, block int) (restore func()) {
	oldChunk, oldBlock := stateChunk, parallelBlock
	stateChunk, parallelBlock = chunk, block
	return func() { stateChunk, parallelBlock = oldChunk, oldBlock }
}
