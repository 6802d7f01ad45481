package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/latchhq/latch/controlplane/vault"
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
	sub, args, fs, t, err := adminCommand(env, "vault", "status | unlock [--init] | lock | put NAME --kind "+strings.Join(kindNames(), "|")+" | list", args)
	if err != nil {
		return err
	}
	init := fs.Bool("init", false, "unlock: create the vault with this passphrase if it does not exist")
	passFile := fs.String("passphrase-file", "", "unlock: read the passphrase from this file (default: first line of stdin)")
	kind := fs.String("kind", "", "put: the credential kind, one of "+strings.Join(kindNames(), ", ")+"; "+kindInputHelp())
	stdinJSON := fs.Bool("stdin-json", false, "put: read all of the kind's fields as one JSON object from stdin (any kind; the default for kinds without flags)")
	fieldFlags := map[string]*string{"key-file": fs.String("key-file", "", "unlock: a 32-byte key file on the control plane's host instead of a passphrase"+fieldFlagHelp("key-file"))}
	for _, name := range fieldFlagNames() {
		if fieldFlags[name] == nil {
			fieldFlags[name] = fs.String(name, "", strings.TrimPrefix(fieldFlagHelp(name), "; "))
		}
	}
	unlockKey := fieldFlags["key-file"]
	asJSON := jsonFlag(fs, sub, "print JSON", "status", "list")
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
			return printJSON(env.Stdout, vaultStatusView(st))
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
			return printJSON(env.Stdout, vaultListJSON{Names: append([]string{}, resp.GetNames()...)})
		}
		for _, n := range resp.GetNames() {
			fmt.Fprintln(env.Stdout, n)
		}
		return nil
	case "put":
		if len(pos) != 1 {
			return usagef("vault put needs exactly one NAME")
		}
		fields, err := readFields(env, *kind, fieldFlags, *stdinJSON)
		if err != nil {
			return err
		}
		req := &controlplanev1.VaultPutRequest{Name: pos[0], Kind: *kind}
		setPutFields(req, fields)
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

// runCatalog validates catalog files offline, or asks the running control
// plane to reload its catalog, describe it, or list an upstream's tools.
func runCatalog(ctx context.Context, env *Env, args []string) error {
	if len(args) > 0 && args[0] == "validate" {
		return runCatalogValidate(ctx, env, args[1:]) // offline: no control plane
	}
	if len(args) > 0 && args[0] == "import" {
		return runCatalogImport(ctx, env, args[1:]) // offline: catalog_import.go
	}
	sub, args, fs, t, err := adminCommand(env, "catalog", "validate FILE... | reload | status | upstream-tools NAME | upstream-tools accept TOOL | import openapi SPEC", args)
	if err != nil {
		return err
	}
	if sub == "validate" {
		return usagef("catalog validate runs offline and takes no connection flags: latch catalog validate [--json] [--no-host-checks] FILE...")
	}
	asJSON := jsonFlag(fs, sub, "print JSON", "status", "upstream-tools")
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
	if sub == "status" && len(pos) == 0 {
		return runCatalogStatus(ctx, env, t, *asJSON)
	}
	if sub != "reload" || len(pos) != 0 {
		return usagef("unknown catalog subcommand %q (want: catalog validate FILE..., catalog reload, catalog status, catalog upstream-tools NAME, or catalog upstream-tools accept TOOL)", strings.Join(append([]string{sub}, pos...), " "))
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
	for _, w := range resp.GetWarnings() {
		fmt.Fprintf(env.Stdout, "warning: %s\n", w)
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

// The `vault put` input of every kind comes from its fields
// (vault.Field): flags, a file named by a flag, one prompted line on
// stdin, or the whole set as one JSON object on stdin. Nothing here names
// a kind.

func kindNames() []string {
	var names []string
	for _, k := range vault.Kinds() {
		names = append(names, string(k.Name()))
	}
	return names
}

// kindInputHelp says which kinds read JSON on stdin by default.
func kindInputHelp() string {
	var names []string
	for _, k := range vault.Kinds() {
		if !hasFlagInput(k) {
			names = append(names, string(k.Name()))
		}
	}
	return strings.Join(names, " and ") + " read a JSON object from stdin"
}

// hasFlagInput reports whether a kind reads its fields from flags or a
// prompt rather than JSON on stdin.
func hasFlagInput(k vault.CredentialKind) bool {
	for _, f := range k.Fields() {
		if f.Flag != "" || f.Prompt {
			return true
		}
	}
	return false
}

// fieldFlagNames are the flags kinds' fields are read from, sorted.
func fieldFlagNames() []string {
	var names []string
	for _, k := range vault.Kinds() {
		for _, f := range k.Fields() {
			if f.Flag != "" && !slices.Contains(names, f.Flag) {
				names = append(names, f.Flag)
			}
		}
	}
	slices.Sort(names)
	return names
}

// fieldFlagHelp is "; put --kind K: <help>" for each kind reading a field
// from flag.
func fieldFlagHelp(flag string) string {
	var b strings.Builder
	for _, k := range vault.Kinds() {
		for _, f := range k.Fields() {
			if f.Flag == flag {
				fmt.Fprintf(&b, "; put --kind %s: %s", k.Name(), f.Help)
				if f.Prompt {
					continue
				}
				for _, p := range k.Fields() {
					if p.Prompt {
						fmt.Fprintf(&b, " (%s: one line on stdin)", p.Name)
					}
				}
			}
		}
	}
	return b.String()
}

// readFields reads the fields of a credential of kind for vault put.
func readFields(env *Env, kind string, flags map[string]*string, stdinJSON bool) (vault.Fields, error) {
	k, ok := vault.Lookup(vault.Kind(kind))
	if !ok {
		return nil, usagef("--kind must be one of %s", strings.Join(kindNames(), ", "))
	}
	for _, name := range fieldFlagNames() {
		if *flags[name] == "" {
			continue
		}
		if !slices.ContainsFunc(k.Fields(), func(f vault.Field) bool { return f.Flag == name }) || stdinJSON {
			return nil, usagef("--%s is not read for --kind %s%s", name, kind, map[bool]string{true: " with --stdin-json", false: ""}[stdinJSON])
		}
	}
	fields := vault.Fields{}
	if stdinJSON || !hasFlagInput(k) {
		fmt.Fprintf(env.Stderr, "%s fields as one JSON object on stdin (see latch vault put -h):\n", kind)
		return fields, readKindJSON(env.Stdin, k, fields)
	}
	for _, f := range k.Fields() {
		switch {
		case f.Flag != "" && f.File:
			path := *flags[f.Flag]
			if path == "" {
				return nil, usagef("--kind %s needs --%s", kind, f.Flag)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return nil, err
			}
			fields[f.Name] = string(b)
		case f.Flag != "":
			fields[f.Name] = *flags[f.Flag]
		case f.Prompt:
			fmt.Fprintln(env.Stderr, "secret value (one line on stdin):")
			secret, err := readLine(env.Stdin)
			if err != nil {
				return nil, err
			}
			fields[f.Name] = string(secret)
		}
	}
	return fields, nil
}

// setPutFields puts fields in req: in the request field of the same name
// where there is one, else in req.Fields.
func setPutFields(req *controlplanev1.VaultPutRequest, fields vault.Fields) {
	m := req.ProtoReflect()
	for name, v := range fields {
		fd := m.Descriptor().Fields().ByName(protoreflect.Name(name))
		switch {
		case fd == nil || name == "name" || name == "kind" || name == "fields":
			if req.Fields == nil {
				req.Fields = map[string]string{}
			}
			req.Fields[name] = v
		case fd.IsList():
			l := m.Mutable(fd).List()
			for _, item := range vault.ListValue(v) {
				l.Append(protoreflect.ValueOfString(item))
			}
		case fd.Kind() == protoreflect.BytesKind:
			m.Set(fd, protoreflect.ValueOfBytes([]byte(v)))
		default:
			m.Set(fd, protoreflect.ValueOfString(v))
		}
	}
}

// readKindJSON reads the fields of kind k from r as one JSON object keyed
// by field name: strings, and arrays of strings for list fields (the
// examples are in docs/reference/credential-kinds.md). Unknown keys are
// refused. Errors name keys, never values.
func readKindJSON(r io.Reader, k vault.CredentialKind, fields vault.Fields) error {
	kind := k.Name()
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
	var want []string
	for _, f := range k.Fields() {
		w := strconv.Quote(f.Name)
		if f.Type == vault.FieldList {
			w += " (list)"
		}
		if !f.Required {
			w += " (optional)"
		}
		want = append(want, w)
	}
	bad := func(problem string) error {
		return usagef("%s fields: %s (want {%s})", kind, problem, strings.Join(want, ", "))
	}
	var in map[string]json.RawMessage
	if err := json.Unmarshal(b, &in); err != nil {
		return bad(jsonProblem(err))
	}
	for key, raw := range in {
		f, ok := fieldOf(k, key)
		if !ok {
			return bad(fmt.Sprintf("unknown field %q", key))
		}
		if f.Type == vault.FieldList {
			var l []string
			if err := json.Unmarshal(raw, &l); err != nil {
				return bad(fmt.Sprintf("key %q must be a list of strings", key))
			}
			fields[key] = vault.JoinList(l)
			continue
		}
		var v string
		if err := json.Unmarshal(raw, &v); err != nil {
			return bad(fmt.Sprintf("key %q must be a string", key))
		}
		fields[key] = v
	}
	return nil
}

func fieldOf(k vault.CredentialKind, name string) (vault.Field, bool) {
	for _, f := range k.Fields() {
		if f.Name == name {
			return f, true
		}
	}
	return vault.Field{}, false
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
