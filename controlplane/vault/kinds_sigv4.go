package vault

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// SigV4 signs a request with AWS Signature Version 4 using aws-sdk-go-v2's
// signer: the method, the URL (path and query), the headers and the SHA-256
// of the body, for Service in Region. It sets Authorization, X-Amz-Date,
// X-Amz-Content-Sha256 and, with a SessionToken, X-Amz-Security-Token.
type SigV4 struct {
	AccessKeyID, SecretAccessKey, SessionToken, Region, Service string

	// now is the signing clock (tests); nil is time.Now.
	now func() time.Time
}

// sigv4Headers are the headers Apply sets.
var sigv4Headers = []string{"Authorization", "X-Amz-Date", "X-Amz-Content-Sha256", "X-Amz-Security-Token"}

// Apply hashes the body (through r.GetBody, which the dispatcher sets for
// the call; a request without a body hashes the empty string) and signs r.
func (s SigV4) Apply(r *http.Request) error {
	if s.AccessKeyID == "" || s.SecretAccessKey == "" || s.Region == "" || s.Service == "" {
		return errors.New("aws_sigv4 credential needs an access key ID, a secret access key, a region and a service")
	}
	sum := sha256.New()
	switch {
	case r.GetBody != nil:
		body, err := r.GetBody()
		if err != nil {
			return fmt.Errorf("aws_sigv4: read the body to hash it: %w", err)
		}
		_, err = io.Copy(sum, body)
		body.Close()
		if err != nil {
			return fmt.Errorf("aws_sigv4: read the body to hash it: %w", err)
		}
	case r.Body != nil && r.Body != http.NoBody:
		return errors.New("aws_sigv4: the request body cannot be re-read to hash it (the dispatcher must set GetBody)")
	}
	hash := hex.EncodeToString(sum.Sum(nil))
	r.Header.Set("X-Amz-Content-Sha256", hash)
	now := time.Now
	if s.now != nil {
		now = s.now
	}
	creds := aws.Credentials{AccessKeyID: s.AccessKeyID, SecretAccessKey: s.SecretAccessKey, SessionToken: s.SessionToken}
	if err := v4.NewSigner().SignHTTP(context.WithoutCancel(r.Context()), creds, r, hash, s.Service, s.Region, now().UTC()); err != nil {
		return fmt.Errorf("aws_sigv4: sign the request: %w", err)
	}
	return nil
}

// Headers are the signature's headers.
func (SigV4) Headers() []string { return sigv4Headers }

// Secrets are the secret access key and the session token (sent as
// X-Amz-Security-Token). The signature is one request's; the dispatcher
// redacts the Authorization header it is in, and the signature alone.
func (s SigV4) Secrets() [][]byte {
	out := [][]byte{[]byte(s.SecretAccessKey)}
	if s.SessionToken != "" {
		out = append(out, []byte(s.SessionToken))
	}
	return out
}

// String never shows the secret.
func (SigV4) String() string { return "vault.SigV4{" + redacted + "}" }

func (s SigV4) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, s.String()) }

func (SigV4) MarshalJSON() ([]byte, error) { return redactedJSON(KindAWSSigV4) }

var (
	awsRegionRE  = regexp.MustCompile(`^[a-z]{2}(-[a-z0-9]+)+-[0-9]+$|^[a-z0-9-]{2,32}$`)
	awsServiceRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
	awsKeyIDRE   = regexp.MustCompile(`^[A-Z0-9]{16,128}$`)
)

// sigV4Kind signs each request with AWS Signature Version 4 over its
// method, URL, headers and body hash.
type sigV4Kind struct{}

func (sigV4Kind) Name() Kind { return KindAWSSigV4 }

func (sigV4Kind) Fields() []Field {
	return []Field{
		{Name: "access_key_id", Required: true, Help: "the access key ID (AKIA...)"},
		{Name: "secret_access_key", Required: true, Secret: true, Help: "the secret access key"},
		{Name: "session_token", Secret: true, Help: "a session token (temporary credentials; optional)"},
		{Name: "region", Required: true, Help: "the AWS Region the requests are signed for, like eu-west-1"},
		{Name: "service", Required: true, Help: "the signing name, like s3 or execute-api"},
	}
}

// Validate checks the fields' forms. Messages name fields, never values (a
// secret pasted into the wrong field is not echoed).
func (sigV4Kind) Validate(c Credential) error {
	switch {
	case !awsKeyIDRE.MatchString(c.Get("access_key_id")):
		return invalidf("aws_sigv4 access key ID must be 16 to 128 upper-case letters and digits (like AKIA...)")
	case !validHeaderValue(c.Get("secret_access_key")) || hasSpace(c.Get("secret_access_key")):
		return invalidf("aws_sigv4 secret access key holds spaces or control characters")
	case !validHeaderValue(c.Get("session_token")) || hasSpace(c.Get("session_token")):
		return invalidf("aws_sigv4 session token holds spaces or control characters")
	case !awsRegionRE.MatchString(c.Get("region")):
		return invalidf("aws_sigv4 region must look like us-east-1")
	case !awsServiceRE.MatchString(c.Get("service")):
		return invalidf("aws_sigv4 service must be the signing name in lower case, like s3, execute-api or sqs")
	}
	return nil
}

func (sigV4Kind) HTTP(c Credential) HTTPCredential {
	return SigV4{AccessKeyID: c.Get("access_key_id"), SecretAccessKey: c.Get("secret_access_key"), SessionToken: c.Get("session_token"), Region: c.Get("region"), Service: c.Get("service")}
}
