module cgprof.test/gocgoworkload

go 1.19
