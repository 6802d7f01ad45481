// Package errinfo is the one place that builds and reads the
// google.rpc.ErrorInfo details of the control plane's gRPC refusals: the
// domain "latch.dev" and the reasons of controlplanev1.ErrorReason. The
// control plane's services, the replica client, the CLI and the MCP front
// use it; none declares the domain or a reason string of its own.
package errinfo

import (
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
)

// Domain is the ErrorInfo domain of every control-plane refusal.
const Domain = "latch.dev"

// MetaProblem is the ErrorInfo metadata key of a refusal's caller-facing
// problem (engine.Refusal, tools.ArgumentError): what is wrong and what is
// expected, written for the caller without package prefixes.
const MetaProblem = "problem"

const prefix = "ERROR_REASON_"

// Name is r as an ErrorInfo reason: "UNKNOWN_TOOL".
func Name(r controlplanev1.ErrorReason) string {
	return strings.TrimPrefix(r.String(), prefix)
}

// Status is a status with code and msg carrying an ErrorInfo of reason r;
// kv are metadata pairs, and pairs with an empty value are left out.
func Status(c codes.Code, msg string, r controlplanev1.ErrorReason, kv ...string) *status.Status {
	st := status.New(c, msg)
	info := &errdetails.ErrorInfo{Reason: Name(r), Domain: Domain}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			if info.Metadata == nil {
				info.Metadata = map[string]string{}
			}
			info.Metadata[kv[i]] = kv[i+1]
		}
	}
	if d, err := st.WithDetails(info); err == nil {
		return d
	}
	return st
}

// Error is Status(...).Err().
func Error(c codes.Code, msg string, r controlplanev1.ErrorReason, kv ...string) error {
	return Status(c, msg, r, kv...).Err()
}

// Of returns the reason and metadata of err's control-plane ErrorInfo;
// ok is false when err carries none (another domain's reasons are not ours).
// A reason this build does not know is ERROR_REASON_UNSPECIFIED with ok.
func Of(err error) (r controlplanev1.ErrorReason, md map[string]string, ok bool) {
	st, isStatus := status.FromError(err)
	if !isStatus {
		return 0, nil, false
	}
	for _, d := range st.Details() {
		if i, isInfo := d.(*errdetails.ErrorInfo); isInfo && i.GetDomain() == Domain {
			v := controlplanev1.ErrorReason_value[prefix+i.GetReason()]
			return controlplanev1.ErrorReason(v), i.GetMetadata(), true
		}
	}
	return 0, nil, false
}

// Problem is the caller-facing problem of err's control-plane ErrorInfo
// (MetaProblem), or "" when it carries none.
func Problem(err error) string {
	_, md, _ := Of(err)
	return md[MetaProblem]
}

// Is reports whether err is a refusal of reason r.
func Is(err error, r controlplanev1.ErrorReason) bool {
	got, _, ok := Of(err)
	return ok && got == r
}
