package provider

import (
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Notifier turns a deployer's "something changed" callbacks into reconcile
// requests. The Kubernetes deployer needs none (the reconcilers own the Jobs
// and Deployments it creates); the process deployer has nothing to watch, so
// it calls Notify when a process exits or becomes ready.
type Notifier struct {
	mu    sync.Mutex
	chans map[string]chan event.GenericEvent
}

// NewNotifier returns a Notifier; give it to the reconcilers with
// WithNotifier and wire its Notify into the deployer.
func NewNotifier() *Notifier {
	return &Notifier{chans: map[string]chan event.GenericEvent{}}
}

// notifyBuffer bounds the events queued per kind; beyond it, Notify drops
// events, which only delays a reconcile the next event or resync triggers.
const notifyBuffer = 1024

func (n *Notifier) channel(kind string) chan event.GenericEvent {
	n.mu.Lock()
	defer n.mu.Unlock()
	ch, ok := n.chans[kind]
	if !ok {
		ch = make(chan event.GenericEvent, notifyBuffer)
		n.chans[kind] = ch
	}
	return ch
}

// Notify requests a reconcile of the provider of kind (e.g.
// "ServiceProvider") named name. It never blocks.
func (n *Notifier) Notify(kind, name string) {
	obj := kindObject(kind)
	if obj == nil {
		return
	}
	obj.SetName(name)
	select {
	case n.channel(kind) <- event.GenericEvent{Object: obj}:
	default:
	}
}

func (n *Notifier) source(kind string) source.Source {
	return source.Channel(n.channel(kind), &handler.EnqueueRequestForObject{})
}

// kindObject returns an empty object of one of the three provider kinds.
func kindObject(kind string) client.Object {
	switch kind {
	case ServiceProviders().Name:
		return ServiceProviders().New()
	case ClusterProviders().Name:
		return ClusterProviders().New()
	case PlatformServices().Name:
		return PlatformServices().New()
	}
	return nil
}

// WithNotifier makes the reconcilers also reconcile a provider whenever n is
// notified about it.
func WithNotifier(n *Notifier) Option { return func(o *options) { o.notifier = n } }
