// Package supervisor starts and stops the local processes of Marketplane:
// the control plane of the landscape (etcd, kube-apiserver,
// kube-controller-manager) and the providers that the process deployer of
// the operator runs.
//
// A Spawner forks every process from one goroutine locked to its OS thread.
// On Linux each child gets Pdeathsig, which the kernel ties to the thread
// that forked it, not to the process; the Go runtime may end other threads,
// so forking from a thread that lives as long as the Spawner makes
// Pdeathsig mean "the supervising program died". Spawner.Close kills what
// still runs. A command that its caller waits for and stops itself (a
// test's kube-controller-manager) goes through StartCmd, whose thread lives
// as long as the program: a plain exec.Cmd.Start with Pdeathsig would fork
// from whatever thread it runs on, and a Spawner that later locks that
// thread ends it on Close, killing the process. Each child leads a process
// group of its own, so that Process.Stop (SIGTERM, a grace period, then
// SIGKILL) also reaches whatever the child started.
//
// Every process appends its output to a log file after a header line; a
// Process reports how it ended (ExitCode, DescribeExit, ExitError), the
// output it wrote (OutputTail), and an exit that nobody asked for arrives on
// Spawner.Crashes.
//
// Spawner.Supervise keeps a process running: one that exits without Stop
// is started again with a fresh command after a backoff (DefaultBackoff: 1
// s doubling up to 30 s, starting over once it stayed up DefaultStableAfter),
// and every exit and restart is reported (SupervisedCommand.OnEvent). The
// landscape runs its etcd, API servers, controller managers and broker this
// way. KeepRunning is the restart loop itself, also used by the operator's
// process deployer for providers, with their replicas and ports.
//
// Processes that an earlier run recorded, and that this one did not start,
// are identified with StartTime and Running and stopped with StopPID.
//
// Other systems than Linux have no Pdeathsig and no /proc: a supervising
// program that is killed leaves its processes behind, and a recorded process
// can only be identified by its PID.
package supervisor
