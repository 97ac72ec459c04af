// Package importgraph holds no code, only a test of what a module that
// imports pgfailover inherits: a fresh module importing every public
// package of this one, tidied, must not find in its module graph
// (go list -m all) the modules this module's tests once required and an
// importer has no use for. Every requirement in this module's go.mod
// reaches every importer's graph, whether its packages or only its tests
// need it; see the test for the list.
package importgraph
