package cli

import "flag"

// witnessFlags name the witness that co-signs the journal's checkpoints
// (latch serve and latch dev).
type witnessFlags struct {
	url, key *string
}

func addWitnessFlags(fs *flag.FlagSet) *witnessFlags {
	return &witnessFlags{
		url: fs.String("witness-url", "", "base URL of a witness (c2sp.org/tlog-witness, e.g. litewitness) that co-signs every checkpoint; receipts then carry its cosignature"),
		key: fs.String("witness-key", "", "the witness's cosignature verifier key (text or a file holding it); required with --witness-url"),
	}
}

// resolve checks the pair and reads the key: both or neither.
func (w *witnessFlags) resolve() (string, error) {
	switch {
	case *w.url == "" && *w.key == "":
		return "", nil
	case *w.url == "" || *w.key == "":
		return "", usagef("--witness-url and --witness-key go together: the witness's base URL and its verifier key (as the witness prints it)")
	}
	return readKey(*w.key)
}
