module github.com/replicago/replica

go 1.26

require golang.org/x/tools v0.38.0

require (
	golang.org/x/mod v0.29.0 // indirect
	golang.org/x/sync v0.17.0 // indirect
	pgregory.net/rapid v1.3.0 // indirect
)
