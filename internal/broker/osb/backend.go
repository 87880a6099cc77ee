package osb

import "context"

// Call is what the checks before an endpoint learnt of a request: the
// backend answers as its version defines, records its identities and logs
// its request identity.
type Call struct {
	// Version is the request's X-Broker-API-Version.
	Version APIVersion
	// Identity is the parsed originating identity, nil when none was sent.
	Identity *OriginatingIdentity
	// RequestID is X-Broker-API-Request-Identity, "" when none was sent.
	RequestID string
	// AcceptsIncomplete is the accepts_incomplete query parameter of a
	// PUT, PATCH or DELETE.
	AcceptsIncomplete bool
}

// AsyncBindings reports whether the caller's version knows asynchronous
// bindings (accepts_incomplete on bind and unbind): 2.14 added them. A
// caller of an older version that sends accepts_incomplete=true anyway
// (Service Manager does) is taken at its word.
func (c *Call) AsyncBindings() bool { return !c.Version.Less(Version2_14) }

// Backend answers the instance and binding endpoints of a Handler, one
// method each, with a request that passed the shared checks and whose ids,
// query and body were parsed. A method returns the status and a body to
// encode as JSON (a RawJSON as is), or an error: an *Error is sent as
// it is, any other error becomes a 4xx or 5xx by its kind (Kubernetes API
// errors, timeouts).
type Backend interface {
	Provision(ctx context.Context, c *Call, req *ProvisionRequest) (int, any, error)
	Update(ctx context.Context, c *Call, req *UpdateRequest) (int, any, error)
	FetchInstance(ctx context.Context, c *Call, req *FetchRequest) (int, any, error)
	Deprovision(ctx context.Context, c *Call, req *DeleteRequest) (int, any, error)
	InstanceLastOperation(ctx context.Context, c *Call, req *LastOperationRequest) (int, any, error)
	Bind(ctx context.Context, c *Call, req *BindRequest) (int, any, error)
	FetchBinding(ctx context.Context, c *Call, req *FetchRequest) (int, any, error)
	Unbind(ctx context.Context, c *Call, req *DeleteRequest) (int, any, error)
	BindingLastOperation(ctx context.Context, c *Call, req *LastOperationRequest) (int, any, error)
}
