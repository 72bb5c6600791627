// Runs the test programs of this folder one after another in this one node process, for
// ProgramServer in compat_tests/drivers/programs.py: starting node and loading kafkajs cost
// 0.5-1 s on a loaded machine, which a process per question paid every time.
//
// Each line on stdin is `PROGRAM ARG...`, tab-separated (PROGRAM is a file of this folder
// without .js); the program's run(args) is awaited, and the answer is one line on stdout:
// `ok BASE64(what it prints)` or `error BASE64(its stack)`. Every program makes its own
// kafkajs clients for each run and disconnects them before it answers, so runs share nothing.
'use strict'

const path = require('path')
const readline = require('readline')

const PROGRAMS = new Set(['scenarios', 'secure', 'authorization'])

// Run one program as a command (node PROGRAM.js ARG...): print what it answers, or its stack and exit 1.
function runOnce (run) {
  run(process.argv.slice(2)).then(
    (text) => process.stdout.write(text, () => process.exit(0)),
    (err) => process.stderr.write(`${err.stack || err}\n`, () => process.exit(1)))
}

async function answer (line) {
  const [program, ...args] = line.split('\t')
  try {
    if (!PROGRAMS.has(program)) throw new Error(`unknown program ${program}`)
    const text = await require(path.join(__dirname, `${program}.js`)).run(args)
    return `ok ${Buffer.from(text).toString('base64')}`
  } catch (err) {
    return `error ${Buffer.from(`${err.stack || err}\n`).toString('base64')}`
  }
}

async function serve () {
  const answers = process.stdout
  // stdout carries answers only: kafkajs' console logger writes info and debug with console.info/log
  console.log = console.info = console.debug = (...words) => console.error(...words)
  for await (const line of readline.createInterface({ input: process.stdin, crlfDelay: Infinity })) {
    const reply = await answer(line)
    await new Promise((resolve) => answers.write(reply + '\n', resolve))
  }
}

if (require.main === module) {
  serve().then(() => process.exit(0))
}

module.exports = { runOnce }
