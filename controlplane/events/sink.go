package events

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// Payload formats of a sink.
const (
	FormatJSON  = "json"  // Latch's event JSON (Payload)
	FormatSlack = "slack" // a Slack incoming-webhook message (SlackPayload)
)

// ErrBadSink is matched by every error ParseSink returns.
var ErrBadSink = errors.New("events: bad event sink")

// Sink is one operator-configured receiver.
type Sink struct {
	Name string
	// URL is the HTTPS endpoint (http only to a loopback address, for tests
	// and local relays).
	URL string
	// Secret names the vault credential holding the whsec_ signing secret
	// ("" for a sink that verifies nothing, e.g. Slack, whose URL is the secret).
	Secret string
	Format string
	// Kinds it takes (empty: every kind).
	Kinds []recordv1.EventKind
	// AllowPrivate lets it reach loopback and private addresses.
	AllowPrivate bool
	// CAFile, when set, is the PEM CA its TLS certificate must chain to.
	CAFile string
}

// Takes reports whether s subscribes to kind k.
func (s Sink) Takes(k recordv1.EventKind) bool {
	return len(s.Kinds) == 0 || slices.Contains(s.Kinds, k)
}

// ParseSink reads a sink from its configuration value:
//
//	NAME url=https://… [secret=CREDENTIAL] [format=json|slack] [events=k1,k2] [allow_private=true] [ca_file=PATH]
func ParseSink(spec string) (Sink, error) {
	fields := strings.Fields(spec)
	if len(fields) == 0 {
		return Sink{}, fmt.Errorf("%w: empty (write NAME url=https://… secret=CREDENTIAL)", ErrBadSink)
	}
	s := Sink{Name: fields[0], Format: FormatJSON}
	if strings.Contains(s.Name, "=") {
		return Sink{}, fmt.Errorf("%w: %q: the value starts with the sink's name (NAME url=https://…)", ErrBadSink, spec)
	}
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok || v == "" {
			return Sink{}, fmt.Errorf("%w %s: %q is not key=value", ErrBadSink, s.Name, f)
		}
		switch k {
		case "url":
			s.URL = v
		case "secret":
			s.Secret = v
		case "format":
			if v != FormatJSON && v != FormatSlack {
				return Sink{}, fmt.Errorf("%w %s: format %q: use json or slack", ErrBadSink, s.Name, v)
			}
			s.Format = v
		case "events":
			for _, n := range strings.Split(v, ",") {
				kind, err := ParseKind(n)
				if err != nil {
					return Sink{}, fmt.Errorf("%w %s: %w", ErrBadSink, s.Name, err)
				}
				s.Kinds = append(s.Kinds, kind)
			}
		case "allow_private":
			s.AllowPrivate = v == "true"
		case "ca_file":
			s.CAFile = v
		default:
			return Sink{}, fmt.Errorf("%w %s: unknown key %q (url, secret, format, events, allow_private, ca_file)", ErrBadSink, s.Name, k)
		}
	}
	u, err := url.Parse(s.URL)
	switch {
	case s.URL == "":
		return Sink{}, fmt.Errorf("%w %s: url= is required", ErrBadSink, s.Name)
	case err != nil || u.Host == "":
		return Sink{}, fmt.Errorf("%w %s: url %q is not an absolute URL", ErrBadSink, s.Name, s.URL)
	case u.User != nil:
		return Sink{}, fmt.Errorf("%w %s: the url carries credentials: put the signing secret in the vault and name it with secret=", ErrBadSink, s.Name)
	case u.Scheme != "https" && (u.Scheme != "http" || !isLoopbackHost(u.Hostname())):
		return Sink{}, fmt.Errorf("%w %s: url must be https (http only to a loopback address)", ErrBadSink, s.Name)
	case s.Format == FormatJSON && s.Secret == "":
		return Sink{}, fmt.Errorf("%w %s: a json sink needs secret=CREDENTIAL (a vault credential holding its whsec_ signing secret)", ErrBadSink, s.Name)
	}
	return s, nil
}

func isLoopbackHost(h string) bool {
	return h == "localhost" || h == "::1" || strings.HasPrefix(h, "127.")
}
