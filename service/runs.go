package service

import "github.com/tooldispatch/tooldispatch/internal/rundecl"

// maxRunDecls bounds how many runs' declarations the server keeps, for later
// turns of the run and for GET /v1/tools (the least recently declared is
// forgotten).
const maxRunDecls = 4096

// defaultRun is the run of a turn that names none (the dispatcher's default).
const defaultRun = "default"

// runKey names a run of a session.
type runKey = rundecl.Key

// runDecl is what a run declared in an earlier turn: its client tools and
// the tools it excludes. A turn that leaves a field out keeps the run's
// declaration, as the run command does.
type runDecl = rundecl.Decl

// runDecls keeps the declarations of recent runs.
type runDecls = rundecl.Table
