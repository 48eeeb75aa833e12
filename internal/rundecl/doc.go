// Package rundecl keeps what the turns of a run declared for the run: its
// client tools and the tools it excludes. A later turn of the run that
// leaves a field out keeps the run's declaration; one that sends it, even
// empty, replaces it. The run command and the HTTP service both follow that
// rule through a Table.
package rundecl
