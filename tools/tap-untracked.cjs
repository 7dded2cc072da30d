// Preloaded into each test file by tap (package.json's tap node-arg; --require runs before tap's
// own --import). tap's process tracker (@tapjs/processinfo) records every module a test loads,
// re-reading each file and its source map, for coverage and `tap --changed`; this project uses
// neither (coverage is off), and the recording costs each test file about half a second of CPU.
// Its exclusion pattern, read when it starts, is set to exclude everything.
process.env._TAPJS_PROCESSINFO_EXCLUDE_ = '/./'
