module github.com/worldgate/worldgate/scripts

go 1.26.0
