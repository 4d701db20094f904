package procfs

import "syscall"

// errESRCH is what reading a file of an exiting task can give.
const errESRCH = syscall.ESRCH
