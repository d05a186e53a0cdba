package main

func runDemo(args []string) error { return nil }
