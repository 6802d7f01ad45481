package tokens

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkAuthenticate is what the control plane adds to every Submit
// that carries a credential: one hash and two reads of the store (Badger,
// 1000 tokens), last_used_at fresh so no write.
func BenchmarkAuthenticate(b *testing.B) {
	s, _, c := newServiceTB(b)
	var tok string
	for i := range 1000 {
		tk, _, err := s.Create(b.Context(), fmt.Sprintf("actor%d", i), 0)
		if err != nil {
			b.Fatal(err)
		}
		tok = tk
	}
	if _, err := s.Authenticate(b.Context(), tok); err != nil {
		b.Fatal(err)
	}
	c.Add(time.Second)
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.Authenticate(b.Context(), tok); err != nil {
			b.Fatal(err)
		}
	}
}
