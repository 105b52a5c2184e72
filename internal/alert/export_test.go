package alert

// FlushDead reports the dead-event groups that are due (the watcher does
// it every second).
func (n *Notifier) FlushDead() { n.flushDead() }
