// Package shellword quotes words for a POSIX shell: how a command an
// operator may paste (or one sshd's login shell parses) is written. Used by
// sshdial (the commands it sends) and the operator commands Latch prints.
//
// Any package may import it; it imports nothing of Latch.
package shellword

import "strings"

// Quote quotes one word for a POSIX shell (sh, bash, dash, ksh, zsh):
// a word made only of safe characters stays bare; others are
// single-quoted, each single quote inside written as quote, backslash,
// quote, quote (the POSIX way to end, escape and reopen).
func Quote(s string) string {
	if s == "" {
		return "''"
	}
	if isSafeWord(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// isSafeWord reports whether s consists only of characters that no POSIX
// shell treats specially anywhere in a word. '=' is left out (a bare
// NAME=value first word is an assignment), as are '~' (tilde expansion),
// '#' (comment at word start) and '%' and '^' (job specs, zsh globs).
func isSafeWord(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '_' || c == '-' || c == '.' || c == '/' || c == ',' || c == ':' || c == '+' || c == '@':
		default:
			return false
		}
	}
	return true
}
