package store

// Sealed secret arguments.
//
//	k/<execution id>   the execution's arguments, secret ones included, sealed
//	                   by the engine's Sealer (AEAD under a key derived from the
//	                   vault); never in clear. Kept while the execution may
//	                   still be sent, deleted when it settles.
//
// The store treats the value as opaque bytes: it never sees the key.

func sealedKey(id string) []byte { return []byte("k/" + id) }

// PutSealedArguments stores the sealed arguments of execution id.
func (t *Tx) PutSealedArguments(id string, sealed []byte) {
	t.set(sealedKey(id), append([]byte(nil), sealed...))
}

// DeleteSealedArguments removes them (a no-op when there are none).
func (t *Tx) DeleteSealedArguments(id string) { t.del(sealedKey(id)) }

// SealedArguments returns the sealed arguments of execution id, or
// ErrNotFound.
func (s *Store) SealedArguments(id string) ([]byte, error) {
	return s.kv.Get(sealedKey(id))
}
