// Package space keeps a free-space reserve on the store's disk. A Guard
// checks the file system of the data folder (statfs): below the reserve no
// new turn is admitted (Admit), and at the store's seam (cachestore/seam)
// a write is refused before anything of it is written when it would leave
// less than the floor free. Reads are never refused. The check is made
// afresh every time, so writes and turns are taken again as soon as space
// is freed, without a restart.
//
// It exists because Badger writes its memtables and value log through
// memory-mapped, sparse files: on a full disk a write does not fail, the
// page fault kills the process (SIGBUS). The reserve and the floor are
// sized from the store's files (cachestore/badger.SpaceNeeds).
//
// It knows nothing of actors, tools or HTTP: it refuses with a
// *cachestore.NoSpaceError, and its callers answer 507 or exit.
package space
