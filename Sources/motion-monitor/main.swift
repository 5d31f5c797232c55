import Glibc

// All the logic lives in the other files, as a module the tests import; this only runs it.
exit(Monitor.main(arguments: Array(CommandLine.arguments.dropFirst())))
