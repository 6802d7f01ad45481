package auth

import (
	"fmt"

	"github.com/latchhq/latch/internal/actorname"
)

// MaxActorLen bounds an actor name in bytes.
const MaxActorLen = actorname.MaxLen

// ValidateActor applies the actor-name rule every actor obeys, however it
// authenticated (a static token, a JWT claim): actorname.Check, the rule
// the control plane applies too (non-empty, at most MaxActorLen bytes, NFC
// UTF-8, no spaces, controls, format, separator, private-use, unassigned or
// other invisible characters). It returns an error wrapping ErrBadActor
// and actorname.ErrInvalid.
func ValidateActor(actor string) error {
	if err := actorname.Check(actor); err != nil {
		return fmt.Errorf("%w: %w", ErrBadActor, err)
	}
	return nil
}
