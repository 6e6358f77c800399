package typed

import "sync/atomic"

type atomicCounter struct{ n atomic.Int64 }

func (c *atomicCounter) add()        { c.n.Add(1) }
func (c *atomicCounter) load() int64 { return c.n.Load() }
