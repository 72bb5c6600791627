// Produce one message and read it back over a secure listener with kafkajs.
// args: bootstrap, JSON {protocol, mechanism, username, password, ca, token}, topic (token: the OAUTHBEARER access
// token, handed out by an oauthBearerProvider). Answers OK <value> or ERROR <name>: <message>
// (run by server.js for compat_tests/test_security_clients.py; `node secure.js ARG...` runs it once).
'use strict'

const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

async function run ([bootstrap, settingsJson, topic]) {
  const s = JSON.parse(settingsJson)
  const config = { clientId: 'secure-test', brokers: [bootstrap], logLevel: logLevel.NOTHING, retry: { retries: 1 } }
  if (s.protocol.endsWith('SSL')) config.ssl = { ca: [fs.readFileSync(s.ca, 'utf-8')] }
  if (s.protocol.startsWith('SASL_') && s.mechanism === 'OAUTHBEARER') {
    config.sasl = { mechanism: 'oauthbearer', oauthBearerProvider: async () => ({ value: s.token }) }
  } else if (s.protocol.startsWith('SASL_')) {
    config.sasl = { mechanism: s.mechanism.toLowerCase(), username: s.username, password: s.password }
  }
  const kafka = new Kafka(config)
  const producer = kafka.producer()
  try {
    await producer.connect()
    await producer.send({ topic, messages: [{ value: 'hello-kafkajs' }] })
  } catch (e) {
    return `ERROR ${e.name}: ${e.message}\n`
  } finally {
    await producer.disconnect()
  }
  // maxWaitTimeInMs: the disconnect waits for the fetch in flight, which the broker holds up to it (default 5 s)
  const consumer = kafka.consumer({ groupId: `secure-${Date.now()}`, maxWaitTimeInMs: 500 })
  try {
    await consumer.connect()
    await consumer.subscribe({ topic, fromBeginning: true })
    const got = await new Promise((resolve) => {
      const timer = setTimeout(() => resolve(null), 30000)
      consumer.run({ eachMessage: async ({ message }) => { clearTimeout(timer); resolve(message.value.toString()) } })
    })
    return got === null ? 'ERROR nothing consumed\n' : `OK ${got}\n`
  } finally {
    await consumer.disconnect()
  }
}

if (require.main === module) require('./server').runOnce(run)

module.exports = { run }
