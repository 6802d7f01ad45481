package vault

import (
	"errors"
	"fmt"
	"io"

	"golang.org/x/crypto/ssh"
)

// sshKeyKind is an unencrypted SSH private key (PEM or OpenSSH format).
type sshKeyKind struct{}

func (sshKeyKind) Name() Kind { return KindSSHKey }

func (sshKeyKind) Fields() []Field {
	return []Field{{Name: "private_key", Type: FieldBytes, Required: true, Secret: true, Flag: "key-file", File: true,
		Help: "the private key file (unencrypted OpenSSH or PEM)"}}
}

func (sshKeyKind) Validate(c Credential) error {
	if _, err := ssh.ParsePrivateKey([]byte(c.Get("private_key"))); err != nil {
		// The parser's own message is not passed on: it is not worth the
		// risk of quoting key material in an error.
		var pm *ssh.PassphraseMissingError
		if errors.As(err, &pm) {
			return invalidf("ssh private key is passphrase-protected; store an unencrypted key (ssh-keygen -p -N '')")
		}
		return invalidf("ssh private key does not parse; want an unencrypted OpenSSH or PEM private key")
	}
	return nil
}

func (sshKeyKind) SSH(c Credential) SSHCredential {
	return SSHKey{PrivateKey: []byte(c.Get("private_key"))}
}

// SSHKey is an unencrypted SSH private key (PEM or OpenSSH format).
type SSHKey struct{ PrivateKey []byte }

// Signer parses the key.
func (k SSHKey) Signer() (ssh.Signer, error) {
	s, err := ssh.ParsePrivateKey(k.PrivateKey)
	if err != nil {
		// x/crypto's parse errors name the problem, never the key.
		return nil, fmt.Errorf("not a usable unencrypted SSH private key (%w)", err)
	}
	return s, nil
}

// String never shows the key.
func (SSHKey) String() string { return "vault.SSHKey{" + redacted + "}" }

func (k SSHKey) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, k.String()) }

func (SSHKey) MarshalJSON() ([]byte, error) { return redactedJSON(KindSSHKey) }

// redactedJSON is what every kind's presentation marshals to, like
// Credential: a kind that ends up in a JSON encoder leaks nothing.
func redactedJSON(k Kind) ([]byte, error) { return Credential{Kind: k}.MarshalJSON() }
