package toolkit

// KVRecord is one record of a key-value namespace, as the KV interfaces of
// toolkit/secrets and toolkit/memory list them. Like CacheEntry it is an
// alias of an unnamed struct type, so a store declaring the same struct
// (cachestore.KV) satisfies those interfaces without either package
// importing the other.
//
// The storage interfaces of toolkit's packages share two contracts: a
// missing key or version is reported by an error matching fs.ErrNotExist
// (errors.Is), and every method is safe for concurrent use.
type KVRecord = struct {
	Key   string
	Value []byte
}
