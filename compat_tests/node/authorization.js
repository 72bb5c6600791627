// The permissions of the denied-access matrix as a user of kafkajs exercises them, over SASL/SCRAM.
//
// Usage: node authorization.js ACTION BOOTSTRAP USER PASSWORD TOPIC GROUP; prints one JSON object,
// {"error": null} when the broker allowed it, else {"error": "<Kafka's error name>"}
// (compat_tests/test_authorization_matrix.py has server.js run one action per run(), each with its own clients).
'use strict'

const { Kafka, ConfigResourceTypes, logLevel } = require('kafkajs')

const TIMEOUT_MS = 20000

// The actions one user can try, with a Kafka object of their own.
function actions (bootstrap, username, password, topic, group) {
  const kafka = new Kafka({
    clientId: 'kafkacompat-authorization',
    brokers: [bootstrap],
    sasl: { mechanism: 'scram-sha-512', username, password },
    logLevel: logLevel.NOTHING,
    retry: { retries: 2, initialRetryTime: 100, maxRetryTime: 1000 },
  })

  async function withAdmin (work) {
    const admin = kafka.admin()
    await admin.connect()
    try {
      return await work(admin)
    } finally {
      await admin.disconnect()
    }
  }

  return {
    async produce () {
      const producer = kafka.producer()
      await producer.connect()
      try {
        await producer.send({ topic, messages: [{ value: 'payload' }] })
      } finally {
        await producer.disconnect()
      }
    },
    async consume () {
      // maxWaitTimeInMs: the disconnect waits for the fetch in flight, which the broker holds up to it (default 5 s)
      const consumer = kafka.consumer({ groupId: group, maxWaitTimeInMs: 500 })
      await consumer.connect()
      try {
        await consumer.subscribe({ topics: [topic], fromBeginning: true })
        await new Promise((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error('nothing consumed')), TIMEOUT_MS)
          consumer.on(consumer.events.CRASH, (event) => { clearTimeout(timer); reject(event.payload.error) })
          consumer.run({ eachMessage: async () => { clearTimeout(timer); resolve() } }).catch(reject)
        })
      } finally {
        await consumer.disconnect()
      }
    },
    'create topic': () => withAdmin(async (admin) => {
      await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: false })
    }),
    'delete topic': () => withAdmin((admin) => admin.deleteTopics({ topics: [topic] })),
    'alter configs': () => withAdmin((admin) => admin.alterConfigs({
      resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configEntries: [{ name: 'retention.ms', value: '3600000' }] }],
    })),
    'describe group': () => withAdmin((admin) => admin.describeGroups([group])),
    commit: () => withAdmin((admin) => admin.setOffsets({ groupId: group, topic, partitions: [{ partition: 0, offset: '1' }] })),
  }
}

function errorName (error) {
  // kafkajs wraps protocol errors (type: 'TOPIC_AUTHORIZATION_FAILED'), sometimes inside retries or lists
  for (let seen = error; seen; seen = seen.originalError || seen.cause) {
    if (seen.type) return seen.type
    if (Array.isArray(seen.errors) && seen.errors.length) return errorName(seen.errors[0])
  }
  return `${error.name}: ${error.message}`
}

async function run ([action, ...user]) {
  let error = null
  try {
    await actions(...user)[action]()
  } catch (refused) {
    error = errorName(refused)
  }
  return JSON.stringify({ error }) + '\n'
}

if (require.main === module) require('./server').runOnce(run)

module.exports = { run }
