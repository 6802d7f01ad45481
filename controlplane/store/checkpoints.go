package store

// NewestCheckpoints returns up to n stored signed checkpoints, newest
// first (the console shows the newest without reading them all).
func (s *Store) NewestCheckpoints(n int) ([][]byte, error) {
	var out [][]byte
	if n <= 0 {
		return nil, nil
	}
	err := s.kv.ScanFrom([]byte("c/"), nil, true, func(_, v []byte) bool {
		out = append(out, v)
		return len(out) < n
	})
	return out, err
}
