// Package errgroup is a stub of golang.org/x/sync/errgroup's API.
package errgroup

type Group struct{}

func (g *Group) SetLimit(n int)    {}
func (g *Group) Go(f func() error) {}
func (g *Group) Wait() error       { return nil }
