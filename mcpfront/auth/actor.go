package auth

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxActorLen bounds an actor name in bytes.
const MaxActorLen = 256

// ValidateActor applies the actor-name rules every actor obeys, however it
// authenticated (a static token, a JWT claim): non-empty, valid UTF-8, at
// most MaxActorLen bytes, no spaces or control characters. It returns an
// error wrapping ErrBadActor.
func ValidateActor(actor string) error {
	switch {
	case actor == "":
		return fmt.Errorf("%w: the name is empty", ErrBadActor)
	case len(actor) > MaxActorLen:
		return fmt.Errorf("%w: the name is %d bytes long, at most %d are allowed", ErrBadActor, len(actor), MaxActorLen)
	case !utf8.ValidString(actor):
		return fmt.Errorf("%w: %q is not valid UTF-8", ErrBadActor, actor)
	case strings.ContainsFunc(actor, func(r rune) bool { return r < 0x21 || r == 0x7f }):
		return fmt.Errorf("%w: %q (use a non-empty name without spaces or control characters)", ErrBadActor, actor)
	}
	return nil
}
