module github.com/krabka-io/krabka-dispatch

go 1.26
