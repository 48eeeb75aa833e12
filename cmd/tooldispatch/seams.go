package main

import (
	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/toolkit/builtin"
	"github.com/tooldispatch/tooldispatch/toolkit/memory"
	"github.com/tooldispatch/tooldispatch/toolkit/secrets"
	"github.com/tooldispatch/tooldispatch/toolkit/web"
)

// Every cachestore.Store (Badger, Memory, PostgreSQL, Split) satisfies the
// small storage interfaces the tool packages declare for themselves, which
// is how registerTools hands one store to all of them.
var (
	_ builtin.VersionStore = cachestore.Store(nil)
	_ web.CacheStore       = cachestore.Store(nil)
	_ secrets.KV           = cachestore.Store(nil)
	_ memory.Store         = cachestore.Store(nil)
)
