package main

func etcdVsDaemon(r *run, p params) bool { r.Skip("not yet"); return false }
