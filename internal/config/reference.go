package config

import (
	"bytes"
	"flag"
	"fmt"
	"strings"
)

// Reference is the markdown table of the binary's keys in fs: key,
// environment variable, flag (with its deprecated names), type, default,
// whether SIGHUP applies it, and the flag's description.
func (b Binary) Reference(fs *flag.FlagSet) string {
	var sb strings.Builder
	sb.WriteString("| key | environment | flag | type | default | on SIGHUP | description |\n")
	sb.WriteString("|---|---|---|---|---|---|---|\n")
	for _, e := range b.Keys(fs) {
		flags := "`--" + e.Flag.Name + "`"
		for _, a := range Aliases(fs, e.Flag.Name) {
			flags += " (deprecated: `--" + a + "`)"
		}
		def := e.Flag.DefValue
		if def != "" {
			def = "`" + def + "`"
		}
		reload := "restart"
		if e.Reload {
			reload = "applied"
		}
		fmt.Fprintf(&sb, "| `%s` | `%s` | %s | %s | %s | %s | %s |\n", e.Key, b.EnvName(e.Key), flags, e.Type, def, reload, cell(e.Flag.Usage))
	}
	return sb.String()
}

func cell(s string) string {
	return strings.NewReplacer("|", "\\|", "\n", " ").Replace(s)
}

// Section markers around a generated part of a document.
func beginMarker(name string) string { return "<!-- BEGIN GENERATED " + name + " -->\n" }
func endMarker(name string) string   { return "<!-- END GENERATED " + name + " -->\n" }

// Section returns the generated part of doc named name (between its
// markers), or an error naming the markers to add.
func Section(doc []byte, name string) (string, error) {
	b, e := beginMarker(name), endMarker(name)
	i := bytes.Index(doc, []byte(b))
	j := bytes.Index(doc, []byte(e))
	if i < 0 || j < i {
		return "", fmt.Errorf("config: the document has no %q ... %q section", strings.TrimSpace(b), strings.TrimSpace(e))
	}
	return string(doc[i+len(b) : j]), nil
}

// ReplaceSection returns doc with the generated part named name replaced
// by content.
func ReplaceSection(doc []byte, name, content string) ([]byte, error) {
	b, e := beginMarker(name), endMarker(name)
	i := bytes.Index(doc, []byte(b))
	j := bytes.Index(doc, []byte(e))
	if i < 0 || j < i {
		return nil, fmt.Errorf("config: the document has no %q ... %q section", strings.TrimSpace(b), strings.TrimSpace(e))
	}
	out := append([]byte(nil), doc[:i+len(b)]...)
	out = append(out, content...)
	return append(out, doc[j:]...), nil
}
