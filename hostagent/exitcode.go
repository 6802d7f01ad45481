package hostagent

// Exit codes of the latch-hostagent CLI. Documented in the package comment
// and the command's help text; they never change meaning.
const (
	ExitOK               = 0
	ExitRuntime          = 1
	ExitUsage            = 2
	ExitUnreachable      = 3
	ExitAlreadyCompleted = 10
	ExitInProgress       = 11
	ExitFailedBefore     = 12
	ExitNoMarker         = 13
)

// ErrorDomain is the errdetails.ErrorInfo domain of HostAgent refusals.
const ErrorDomain = "hostagent.latch"

// ErrorInfo reasons the HostAgent service attaches to FailedPrecondition
// refusals of the marker API. Clients branch on these, never on messages.
const (
	ReasonAlreadyCompleted = "MARKER_ALREADY_COMPLETED"
	ReasonInProgress       = "MARKER_IN_PROGRESS"
	ReasonFailedBefore     = "MARKER_FAILED_BEFORE"
)
