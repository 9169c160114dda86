module github.com/diskcanary/diskcanary/mixin

go 1.26.8

require (
	github.com/google/go-jsonnet v0.22.0
	github.com/stretchr/testify v1.12.1
	go.yaml.in/yaml/v3 v3.0.6
)

require (
	github.com/diskcanary/diskcanary v0.0.0 // indirect
	github.com/grafana/grafana-foundation-sdk/go v0.0.18 // indirect
	go.yaml.in/yaml/v2 v2.4.4 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	sigs.k8s.io/yaml v1.6.0 // indirect
)

// The product module, from this checkout: mixin builds against the tree it sits in.
replace github.com/diskcanary/diskcanary => ../

require github.com/diskcanary/diskcanary/tools/rulegen v0.0.0

replace github.com/diskcanary/diskcanary/tools/rulegen => ../tools/rulegen
