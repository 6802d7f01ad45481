package server

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
)

// apiServices are the services every listener serves: registered when the
// gRPC servers are built (gRPC takes no registration once serving) and
// bound to their implementations when the state is loaded, which on a
// standby is long after its listeners opened.
var apiServices = []*grpc.ServiceDesc{
	&controlplanev1.ControlPlane_ServiceDesc,
	&controlplanev1.Admin_ServiceDesc,
}

// lateServices binds apiServices to implementations after registration.
// It is the grpc.ServiceRegistrar load hands to api.Register and
// Config.Register.
type lateServices struct {
	impls sync.Map // service name -> implementation

	mu   sync.Mutex
	errs []error
}

var _ grpc.ServiceRegistrar = (*lateServices)(nil)

// RegisterService binds impl to its service (grpc.ServiceRegistrar). A
// service outside apiServices, or an impl of the wrong type, is an error
// load returns (err).
func (l *lateServices) RegisterService(d *grpc.ServiceDesc, impl any) {
	known := false
	for _, a := range apiServices {
		known = known || a.ServiceName == d.ServiceName
	}
	var err error
	switch {
	case !known:
		err = fmt.Errorf("server: service %s is not one of the API's services (apiServices in services.go): a standby could not answer for it", d.ServiceName)
	case impl == nil || !reflect.TypeOf(impl).Implements(reflect.TypeOf(d.HandlerType).Elem()):
		err = fmt.Errorf("server: %T does not implement service %s", impl, d.ServiceName)
	default:
		l.impls.Store(d.ServiceName, impl)
		return
	}
	l.mu.Lock()
	l.errs = append(l.errs, err)
	l.mu.Unlock()
}

func (l *lateServices) err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return errors.Join(l.errs...)
}

// registerOn registers every API service on g with handlers that call the
// bound implementation; before it is bound they answer notActive (the gate
// interceptors answer first; this is the backstop), and once the server is
// active a service nobody bound is Unimplemented.
func (l *lateServices) registerOn(g grpc.ServiceRegistrar, active func() bool, notActive func() error) {
	for _, d := range apiServices {
		g.RegisterService(l.bind(d, active, notActive), nil)
	}
}

func (l *lateServices) bind(d *grpc.ServiceDesc, active func() bool, notActive func() error) *grpc.ServiceDesc {
	name := d.ServiceName
	impl := func() (any, error) {
		if v, ok := l.impls.Load(name); ok {
			return v, nil
		}
		if !active() {
			return nil, notActive()
		}
		return nil, status.Errorf(codes.Unimplemented, "this control plane does not serve %s", name)
	}
	c := *d
	c.HandlerType = nil // implementations arrive later (RegisterService checks them)
	c.Methods = make([]grpc.MethodDesc, len(d.Methods))
	for i, m := range d.Methods {
		h := m.Handler
		c.Methods[i] = grpc.MethodDesc{MethodName: m.MethodName, Handler: func(_ any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			srv, err := impl()
			if err != nil {
				return nil, err
			}
			return h(srv, ctx, dec, ic)
		}}
	}
	c.Streams = make([]grpc.StreamDesc, len(d.Streams))
	for i, sd := range d.Streams {
		h := sd.Handler
		sd.Handler = func(_ any, stream grpc.ServerStream) error {
			srv, err := impl()
			if err != nil {
				return err
			}
			return h(srv, stream)
		}
		c.Streams[i] = sd
	}
	return &c
}
