module cgprof.test/goworkload

go 1.19
