// Package storetest forges a stopped control plane's store the way an
// attacker with the files would, for the tests that prove each forgery is
// caught (store consistency, engine gates, `latch audit verify` and
// start-up). Only tests import it.
package storetest

import (
	"fmt"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/latchhq/latch/controlplane/store"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// Forgery is one kind of edit to the stored state.
type Forgery string

const (
	// ResultBody rewrites the body of the victim's stored result.
	ResultBody Forgery = "result_body"
	// ResultStatus rewrites the status of the victim's stored result.
	ResultStatus Forgery = "result_status"
	// State sets the victim's record to not_executed (and moves its state
	// index entry), which would make an identical retry a new execution.
	State Forgery = "execution_state"
	// Index points the victim's fingerprint index entry at another
	// execution (other).
	Index Forgery = "fingerprint_index"
	// Deleted deletes the victim's execution record and its state index
	// entry; the fingerprint index entry stays.
	Deleted Forgery = "deleted_record"
	// DeletedWithIndex deletes the record and its fingerprint index entry
	// too: only a check that reads the journal itself can see it.
	DeletedWithIndex Forgery = "deleted_record_and_index"
)

// All lists the forgeries every check must catch.
var All = []Forgery{ResultBody, ResultStatus, State, Index, Deleted}

// Forge applies f to kv (a stopped store's backend). victim is the
// execution edited; other is a second execution (used by Index).
func Forge(kv store.KV, f Forgery, victim, other string) error {
	x, err := execution(kv, victim)
	if err != nil {
		return err
	}
	switch f {
	case ResultBody, ResultStatus:
		v, err := kv.Get([]byte("r/" + victim))
		if err != nil {
			return fmt.Errorf("storetest: read result of %s: %w", victim, err)
		}
		r := &recordv1.Result{}
		if err := proto.Unmarshal(v, r); err != nil {
			return err
		}
		if f == ResultBody {
			r.Body = []byte(`{"forged":true}`)
		} else {
			r.Status = 500
		}
		v, err = proto.Marshal(r)
		if err != nil {
			return err
		}
		return kv.Commit([]store.Write{{Key: []byte("r/" + victim), Value: v}})
	case State:
		old := x.GetState()
		x.State = recordv1.State_STATE_NOT_EXECUTED
		v, err := proto.Marshal(x)
		if err != nil {
			return err
		}
		return kv.Commit([]store.Write{
			{Key: []byte("x/" + victim), Value: v},
			{Key: stateKey(old, victim), Delete: true},
			{Key: stateKey(x.GetState(), victim), Value: nil},
		})
	case Index:
		return kv.Commit([]store.Write{{Key: []byte("f/" + x.GetFingerprint()), Value: []byte(other)}})
	case Deleted:
		return kv.Commit([]store.Write{{Key: []byte("x/" + victim), Delete: true}, {Key: stateKey(x.GetState(), victim), Delete: true}})
	case DeletedWithIndex:
		return kv.Commit([]store.Write{{Key: []byte("x/" + victim), Delete: true}, {Key: stateKey(x.GetState(), victim), Delete: true},
			{Key: []byte("f/" + x.GetFingerprint()), Delete: true}})
	}
	return fmt.Errorf("storetest: unknown forgery %q", f)
}

func execution(kv store.KV, id string) (*recordv1.Execution, error) {
	v, err := kv.Get([]byte("x/" + id))
	if err != nil {
		return nil, fmt.Errorf("storetest: read execution %s: %w", id, err)
	}
	x := &recordv1.Execution{}
	return x, proto.Unmarshal(v, x)
}

func stateKey(s recordv1.State, id string) []byte {
	return []byte("s/" + strconv.Itoa(int(s)) + "/" + id)
}
