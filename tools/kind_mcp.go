package tools

// ChannelMCP is the channel of upstream MCP servers.
const ChannelMCP Channel = "mcp"

// MCPKind is the catalog half of the mcp channel. Its targets are not
// declared under targets: but made from upstreams: (upstream.go), and its
// tools are the entries named <upstream>.<tool>; a tool naming an upstream
// as its target is refused.
type MCPKind struct{}

var _ Kind = MCPKind{}

// UpstreamAction is the action of an upstream tool (upstream.go), embedded
// in Tool: the upstream, its name for the tool, and the argument it treats
// as an idempotency key ("" for none). Its target's settings are the
// upstream's (Catalog.Upstreams).
type UpstreamAction struct {
	Upstream            string
	UpstreamTool        string
	IdempotencyArgument string
}

func (MCPKind) Channel() Channel          { return ChannelMCP }
func (MCPKind) TargetKeys() []string      { return nil }
func (MCPKind) ToolKeys() []string        { return nil }
func (MCPKind) ParseTarget(s *TargetSpec) {}

func (MCPKind) ParseTool(s *ToolSpec) {
	s.p.addf(s.f["target"].keyNode, "%s: %s is an upstream MCP server: its tools are entries named %s.<tool> with upstream: and tool:", s.what, s.Target.Name, s.Target.Name)
}
