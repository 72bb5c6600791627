// Produce one message and read it back over a secure listener with kafkajs.
// argv: bootstrap, JSON {protocol, mechanism, username, password, ca}, topic. Prints OK <value> or ERROR <name>: <message>.
const fs = require('fs');
const { Kafka, logLevel } = require('kafkajs');

async function main() {
  const [bootstrap, settingsJson, topic] = process.argv.slice(2);
  const s = JSON.parse(settingsJson);
  const config = { clientId: 'secure-test', brokers: [bootstrap], logLevel: logLevel.NOTHING, retry: { retries: 1 } };
  if (s.protocol.endsWith('SSL')) config.ssl = { ca: [fs.readFileSync(s.ca, 'utf-8')] };
  if (s.protocol.startsWith('SASL_')) {
    config.sasl = { mechanism: s.mechanism.toLowerCase(), username: s.username, password: s.password };
  }
  const kafka = new Kafka(config);
  const producer = kafka.producer();
  try {
    await producer.connect();
    await producer.send({ topic, messages: [{ value: 'hello-kafkajs' }] });
    await producer.disconnect();
  } catch (e) {
    console.log(`ERROR ${e.name}: ${e.message}`);
    process.exit(1);
  }
  const consumer = kafka.consumer({ groupId: `secure-${Date.now()}` });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const got = await new Promise((resolve) => {
    const timer = setTimeout(() => resolve(null), 30000);
    consumer.run({ eachMessage: async ({ message }) => { clearTimeout(timer); resolve(message.value.toString()); } });
  });
  await consumer.disconnect();
  console.log(got === null ? 'ERROR nothing consumed' : `OK ${got}`);
  process.exit(got === null ? 1 : 0);
}
main();
