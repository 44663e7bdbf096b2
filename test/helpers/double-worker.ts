// Worker-thread host of the agent-daemon double (agent-daemon-double.ts). The door's calls block
// their thread in Atomics.wait, so a double answering on the test's own thread could never
// answer; here it has a thread of its own. Commands arrive as messages and are answered on the
// same port: received, silent, drop, edit-agents, close.
import { parentPort, workerData } from 'node:worker_threads';
import { AgentDaemonDouble } from './agent-daemon-double.js';

type Cmd = { id: number; cmd: string; arg?: unknown };

const d = await AgentDaemonDouble.start(workerData as { path?: string; secret?: string });
parentPort!.postMessage({ id: 0, value: d.endpoint });
parentPort!.on('message', (m: Cmd) => {
  void (async () => {
    let value: unknown = null;
    switch (m.cmd) {
      case 'received':
        value = d.received;
        break;
      case 'clear':
        d.received.length = 0;
        break;
      case 'silent':
        d.silent = m.arg as boolean;
        break;
      case 'drop':
        d.dropConnections();
        break;
      case 'state':
        value = {
          agents: d.agents,
          sessions: d.sessions,
          subscriptions: d.subscriptions,
          published: d.published,
        };
        break;
      case 'skills': {
        const [name, skills] = m.arg as [string, string[]];
        const a = d.agents.find((x) => x.name === name);
        if (a) a.skills = skills;
        break;
      }
      case 'close':
        await d.close();
        break;
    }
    parentPort!.postMessage({ id: m.id, value });
  })();
});
