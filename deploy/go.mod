module github.com/worldgate/worldgate/deploy

go 1.26.0
