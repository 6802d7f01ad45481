package tools

import (
	"errors"
	"strconv"
	"unicode/utf8"

	"github.com/latchhq/latch/internal/jsonscan"
)

// Raw-argument checking. encoding/json, which decodes the arguments, is
// lenient in three ways that would let two different requests reach the
// same decoded value, or let a request mean one thing to Latch and another
// to a target: it replaces invalid UTF-8 and lone UTF-16 surrogate escapes
// ("\ud800") by U+FFFD, and it keeps the last of duplicate object keys
// ({"env":"staging","env":"prod"}). CheckRawArguments refuses all three in
// the raw bytes, before anything is decoded, and names where: the argument
// (and the path inside it) that holds the bad string or the repeated key.
// Keys are compared after unescaping, so {"a":1,"\u0061":2} is a duplicate.
// The reading is the strict scanner's (jsonscan), the same the fingerprint's
// canonicaliser uses; this file words its refusals for the caller.

// MaxArgumentsDepth bounds how deeply arrays and objects may nest inside the
// arguments object (the same bound the fingerprint's canonicaliser uses).
const MaxArgumentsDepth = 512

// CheckRawArguments checks one JSON text of a call's arguments: valid JSON,
// valid UTF-8 in every string (no raw invalid bytes, no lone surrogate
// escapes), no duplicate key in any object at any depth, nesting at most
// MaxArgumentsDepth. It does not decode numbers; PrepareArguments refuses
// those out of range. Errors wrap ErrInvalidArguments, name the argument
// path ("argument config.hosts[2].name") and never quote argument values.
func CheckRawArguments(data []byte) error {
	err := jsonscan.Valid(data, jsonscan.Options{MaxDepth: MaxArgumentsDepth})
	var e *jsonscan.Error
	if err == nil || !errors.As(err, &e) {
		return err // Valid returns nil or a *jsonscan.Error
	}
	at := e.Path.String()
	what := where(at)
	if e.InKey {
		what = "a key of " + what
	}
	switch {
	case errors.Is(e, jsonscan.ErrTrailingData):
		return argError("arguments are not valid JSON: unexpected data after the JSON value (offset %d)", e.Offset)
	case errors.Is(e, jsonscan.ErrTooDeep):
		return argError("%s nests arrays and objects deeper than %d levels", where(at), MaxArgumentsDepth)
	case errors.Is(e, jsonscan.ErrDuplicateKey):
		if at == "" {
			return argError("argument %s is given twice; give each argument once", printablePath(e.Key))
		}
		return argError("%s has the key %s twice; give each key once", where(at), strconv.QuoteToASCII(e.Key))
	case errors.Is(e, jsonscan.ErrInvalidUTF8):
		return argError("%s is not valid UTF-8 (byte %#x at offset %d); send text as UTF-8", what, e.Byte, e.Offset)
	case errors.Is(e, jsonscan.ErrLoneSurrogate):
		return argError("%s holds a lone UTF-16 surrogate \\u%04x at offset %d (not a character); send valid Unicode", what, e.Rune, e.Offset)
	default:
		return argError("arguments are not valid JSON: %s (in %s, offset %d)", e.Detail, where(at), e.Offset)
	}
}

// where names a path in a message: "the arguments" for the top level.
func where(at string) string {
	if at == "" {
		return "the arguments"
	}
	return "argument " + printablePath(at)
}

// printablePath quotes a path that holds characters a message should not
// carry raw (control characters, invalid UTF-8, quotes).
func printablePath(at string) string {
	for _, r := range at {
		if r == utf8.RuneError || r < 0x20 || r == 0x7f || r == '"' || !strconv.IsPrint(r) {
			return strconv.QuoteToASCII(at)
		}
	}
	return at
}
