package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
)

func adminClient(ctx context.Context, t *target) (controlplanev1.AdminClient, func(), error) {
	conn, err := t.connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	return controlplanev1.NewAdminClient(conn), func() { conn.Close() }, nil
}

func runVault(ctx context.Context, env *Env, args []string) error {
	sub, args, fs, t, err := adminCommand(env, "vault", "status | unlock [--init] | lock | put NAME --kind bearer|basic|header|ssh_key|aws_sigv4|oauth2_client_credentials | list", args)
	if err != nil {
		return err
	}
	init := fs.Bool("init", false, "unlock: create the vault with this passphrase if it does not exist")
	passFile := fs.String("passphrase-file", "", "unlock: read the passphrase from this file (default: first line of stdin)")
	unlockKey := fs.String("key-file", "", "unlock: a 32-byte key file on the control plane's host instead of a passphrase; put --kind ssh_key: the private key file")
	kind := fs.String("kind", "", "put: bearer, basic, header, ssh_key, aws_sigv4 or oauth2_client_credentials (the last two read a JSON object from stdin)")
	username := fs.String("username", "", "put --kind basic: the user name (the password is read from stdin)")
	header := fs.String("header", "", "put --kind header: the header name (the value is read from stdin)")
	asJSON := fs.Bool("json", false, "status, list: print JSON")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	c, closeFn, err := adminClient(ctx, t)
	if err != nil {
		return err
	}
	defer closeFn()
	switch sub {
	case "status":
		st, err := c.VaultStatus(ctx, &controlplanev1.VaultStatusRequest{})
		if err != nil {
			return rpcError(err)
		}
		if *asJSON {
			return printJSON(env.Stdout, jsonView(st))
		}
		printVaultStatus(env.Stdout, st)
		return nil
	case "unlock":
		var pass []byte
		if *unlockKey != "" {
			abs, err := filepath.Abs(*unlockKey)
			if err != nil {
				return err
			}
			resp, err := c.VaultUnlock(ctx, &controlplanev1.VaultUnlockRequest{KeyFile: abs})
			if err != nil {
				return rpcError(err)
			}
			printVaultStatus(env.Stdout, resp.GetStatus())
			return nil
		}
		if *passFile != "" {
			b, err := os.ReadFile(*passFile)
			if err != nil {
				return err
			}
			pass = []byte(strings.TrimRight(string(b), "\r\n"))
		} else {
			fmt.Fprintln(env.Stderr, "passphrase (one line on stdin):")
			pass, err = readLine(env.Stdin)
			if err != nil {
				return err
			}
		}
		resp, err := c.VaultUnlock(ctx, &controlplanev1.VaultUnlockRequest{Passphrase: pass, Init: *init})
		if err != nil {
			return rpcError(err)
		}
		printVaultStatus(env.Stdout, resp.GetStatus())
		return nil
	case "lock":
		resp, err := c.VaultLock(ctx, &controlplanev1.VaultLockRequest{})
		if err != nil {
			return rpcError(err)
		}
		printVaultStatus(env.Stdout, resp.GetStatus())
		return nil
	case "list":
		resp, err := c.VaultList(ctx, &controlplanev1.VaultListRequest{})
		if err != nil {
			return rpcError(err)
		}
		if *asJSON {
			return printJSON(env.Stdout, map[string]any{"names": append([]string{}, resp.GetNames()...)})
		}
		for _, n := range resp.GetNames() {
			fmt.Fprintln(env.Stdout, n)
		}
		return nil
	case "put":
		if len(pos) != 1 {
			return usagef("vault put needs exactly one NAME")
		}
		req := &controlplanev1.VaultPutRequest{Name: pos[0], Kind: *kind, Username: *username, Header: *header}
		switch *kind {
		case "ssh_key":
			if *unlockKey == "" {
				return usagef("--kind ssh_key needs --key-file")
			}
			if req.PrivateKey, err = os.ReadFile(*unlockKey); err != nil {
				return err
			}
		case "bearer", "basic", "header":
			fmt.Fprintln(env.Stderr, "secret value (one line on stdin):")
			secret, err := readLine(env.Stdin)
			if err != nil {
				return err
			}
			switch *kind {
			case "bearer":
				req.Token = string(secret)
			case "basic":
				req.Password = string(secret)
			default:
				req.Value = string(secret)
			}
		case "aws_sigv4", "oauth2_client_credentials":
			fmt.Fprintf(env.Stderr, "%s fields as one JSON object on stdin (see latch vault put -h):\n", *kind)
			if err := readKindJSON(env.Stdin, *kind, req); err != nil {
				return err
			}
		default:
			return usagef("--kind must be bearer, basic, header, ssh_key, aws_sigv4 or oauth2_client_credentials")
		}
		if _, err := c.VaultPut(ctx, req); err != nil {
			return rpcError(err)
		}
		fmt.Fprintf(env.Stdout, "stored credential %s (%s)\n", pos[0], *kind)
		return nil
	}
	return usagef("unknown vault subcommand %q (want status, unlock, lock, put or list)", sub)
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// runCatalog asks the running control plane to reload its catalog.
func runCatalog(ctx context.Context, env *Env, args []string) error {
	if len(args) > 0 && args[0] == "validate" {
		return runCatalogValidate(ctx, env, args[1:]) // offline: no control plane
	}
	sub, args, fs, t, err := adminCommand(env, "catalog", "reload | upstream-tools NAME | upstream-tools accept TOOL", args)
	if err != nil {
		return err
	}
	asJSON := fs.Bool("json", false, "upstream-tools: print the listing as JSON")
	allowHeld := fs.Bool("allow-held", false, "reload: exit 0 even when tools of the file are held (left out of the catalog in force)")
	hash := fs.String("hash", "", "upstream-tools accept: accept only if the upstream still offers this hash (the one upstream-tools showed)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if sub == "upstream-tools" && len(pos) > 0 && pos[0] == "accept" {
		return runAcceptUpstreamTool(ctx, env, t, pos[1:], *hash)
	}
	if sub == "upstream-tools" {
		return runUpstreamTools(ctx, env, t, pos, *asJSON)
	}
	if sub != "reload" || len(pos) != 0 {
		return usagef("unknown catalog subcommand %q (want: catalog reload, catalog upstream-tools NAME, or catalog upstream-tools accept TOOL)", strings.Join(append([]string{sub}, pos...), " "))
	}
	c, closeFn, err := adminClient(ctx, t)
	if err != nil {
		return err
	}
	defer closeFn()
	resp, err := c.ReloadCatalog(ctx, &controlplanev1.ReloadCatalogRequest{})
	if err != nil {
		return rpcError(err)
	}
	if !resp.GetChanged() {
		fmt.Fprintf(env.Stdout, "catalog unchanged: %s (%s, %d tools)\n", resp.GetVersion(), resp.GetSource(), resp.GetTools())
	} else {
		fmt.Fprintf(env.Stdout, "catalog %s in force (%s, %d tools), replacing %s\n", resp.GetVersion(), resp.GetSource(), resp.GetTools(), or(resp.GetPrevious(), "none"))
	}
	return reportHeld(env, resp.GetHeld(), *allowHeld)
}

// reportHeld lists the tools a reload left out. Any held tool makes the
// reload exit non-zero (a team's deploy script must not take a catalog with
// tools missing for a good one) unless allow says it is expected.
func reportHeld(env *Env, held []*controlplanev1.HeldTool, allow bool) error {
	if len(held) == 0 {
		return nil
	}
	fmt.Fprintf(env.Stdout, "%d tool(s) of the file are held: not exposed to agents until fixed:\n", len(held))
	for _, h := range held {
		fmt.Fprintf(env.Stdout, "  %s: %s\n", h.GetTool(), h.GetReason())
	}
	if allow {
		return nil
	}
	fmt.Fprintln(env.Stderr, "the catalog is in force without them; fix the contracts (or the upstream), or pass --allow-held when held tools are expected")
	return errSilent
}

func printVaultStatus(w io.Writer, st *controlplanev1.VaultStatusResponse) {
	state := "unlocked"
	if st.GetLocked() {
		state = "locked"
	}
	if !st.GetInitialized() {
		state = "not initialized (latch vault unlock --init)"
	}
	fmt.Fprintf(w, "vault %s\npath %s\ncredentials %d\nepoch %d\n", state, st.GetPath(), st.GetNames(), st.GetEpoch())
}

func readLine(r io.Reader) ([]byte, error) {
	if r == nil {
		return nil, usagef("nothing on stdin")
	}
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && err != io.EOF {
		return nil, err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return nil, usagef("an empty value was read from stdin")
	}
	return []byte(line), nil
}

// maxKindJSON bounds the JSON object read for a kind's fields.
const maxKindJSON = 64 << 10

// readKindJSON reads the fields of an aws_sigv4 or oauth2_client_credentials
// credential from r as one JSON object:
//
//	aws_sigv4:                 {"access_key_id": "AKIA…", "secret_access_key": "…", "session_token": "…" (optional),
//	                            "region": "eu-west-1", "service": "execute-api"}
//	oauth2_client_credentials: {"token_url": "https://auth.example.com/oauth/token", "client_id": "…",
//	                            "client_secret": "…", "scopes": ["a", "b"] (optional), "audience": "…" (optional)}
//
// Unknown keys are refused. Errors name keys, never values.
func readKindJSON(r io.Reader, kind string, req *controlplanev1.VaultPutRequest) error {
	if r == nil {
		return usagef("nothing on stdin: pipe the %s fields as a JSON object", kind)
	}
	b, err := io.ReadAll(io.LimitReader(r, maxKindJSON+1))
	if err != nil {
		return err
	}
	if len(b) > maxKindJSON {
		return usagef("the %s fields on stdin are over %d bytes", kind, maxKindJSON)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	switch kind {
	case "aws_sigv4":
		var in struct {
			AccessKeyID     string `json:"access_key_id"`
			SecretAccessKey string `json:"secret_access_key"`
			SessionToken    string `json:"session_token"`
			Region          string `json:"region"`
			Service         string `json:"service"`
		}
		if err := dec.Decode(&in); err != nil {
			return usagef("aws_sigv4 fields: %s (want {\"access_key_id\", \"secret_access_key\", \"session_token\" (optional), \"region\", \"service\"})", jsonProblem(err))
		}
		req.AccessKeyId, req.SecretAccessKey, req.SessionToken, req.Region, req.Service = in.AccessKeyID, in.SecretAccessKey, in.SessionToken, in.Region, in.Service
	default:
		var in struct {
			TokenURL     string   `json:"token_url"`
			ClientID     string   `json:"client_id"`
			ClientSecret string   `json:"client_secret"`
			Scopes       []string `json:"scopes"`
			Audience     string   `json:"audience"`
		}
		if err := dec.Decode(&in); err != nil {
			return usagef("oauth2_client_credentials fields: %s (want {\"token_url\", \"client_id\", \"client_secret\", \"scopes\" (optional list), \"audience\" (optional)})", jsonProblem(err))
		}
		req.TokenUrl, req.ClientId, req.ClientSecret, req.Scopes, req.Audience = in.TokenURL, in.ClientID, in.ClientSecret, in.Scopes, in.Audience
	}
	return nil
}

// jsonProblem describes a decoding error without quoting input values.
func jsonProblem(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("not valid JSON (offset %d)", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("key %q must be %s", te.Field, te.Type)
	}
	// Other decoding errors (an unknown key, the input ending early) quote
	// at most a key.
	return strings.TrimPrefix(err.Error(), "json: ")
}
