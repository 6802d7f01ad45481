package store

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// consoleAddressKey holds the active replica's console address (a
// PostgreSQL store shared by replicas): written by the lease holder, read
// by standbys straight from the backend (they have no loaded state).
var consoleAddressKey = []byte("ca/active")

// PutConsoleAddress records where the active replica serves the console.
func (t *Tx) PutConsoleAddress(x *recordv1.ConsoleAddress) error {
	data, err := proto.Marshal(x)
	if err != nil {
		return fmt.Errorf("store: encode console address: %w", err)
	}
	t.set(consoleAddressKey, data)
	return nil
}

// ReadConsoleAddress reads the console address the active replica last
// recorded in kv; ErrNotFound when none has.
func ReadConsoleAddress(kv KV) (*recordv1.ConsoleAddress, error) {
	v, err := kv.Get(consoleAddressKey)
	if err != nil {
		return nil, err
	}
	x := &recordv1.ConsoleAddress{}
	if err := proto.Unmarshal(v, x); err != nil {
		return nil, fmt.Errorf("store: decode console address: %w", err)
	}
	return x, nil
}
