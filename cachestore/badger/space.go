package badger

// SpaceNeeds returns the free space a store opened with o needs on its
// disk, for cachestore/space: reserve, below which no new turn should
// start, and floor, which no write should take.
//
// Badger writes its memtable's log and its value log through
// memory-mapped files, created sparse at twice their size and rotated once
// they hold one memtable or one value-log file of data: until then a write
// lands in a page the file system has yet to allocate, and on a full disk
// that page fault kills the process (SIGBUS) instead of failing the write.
// The reserve is one memtable and one value-log file, what the files being
// written may still take; the floor is one memtable, what flushing the
// memtable into a level-0 table takes (a flush that cannot be written is
// retried for ever, and writes wait for it). With the Small options that
// is 20 MiB and 4 MiB; with the default ones 1 GiB + 64 MiB and 64 MiB. A
// store in memory needs none (0, 0).
func SpaceNeeds(o Options) (reserve, floor uint64) {
	if o.InMemory {
		return 0, 0
	}
	bo := o.badgerOptions()
	return uint64(bo.MemTableSize + bo.ValueLogFileSize), uint64(bo.MemTableSize)
}
