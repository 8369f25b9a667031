// The dashboard's shell: a hash router (#/agents, #/agents/<slug>, …), the
// navigation, and sign-in/sign-out. Pages render into <main> and get a ctx whose
// alive() turns false when the user navigates away (it stops their polling).
import { h, clear, field, input } from './dom.js';
import { api, getKey, setKey, dropKey, setUnauthorizedHandler } from './api.js';
import { notice, errorSlot, act, go, noticeSurvivesNavigation } from './ui.js';
import { agentsPage } from './agents.js';
import { agentPage } from './agent.js';
import { invocationPage } from './invocation.js';
import { usagePage, keysPage } from './account.js';
import { filesPage, bucketsPage } from './storage.js';

const routes = [
  [/^agents$/, agentsPage, 'Agents'],
  [/^agents\/([^/]+)$/, agentPage, 'Agent'],
  [/^agents\/([^/]+)\/invocations\/([^/]+)$/, invocationPage, 'Invocation'],
  [/^files$/, filesPage, 'Files'],
  [/^buckets$/, bucketsPage, 'Buckets'],
  [/^usage$/, usagePage, 'Usage'],
  [/^keys$/, keysPage, 'API keys'],
];

let generation = 0;

function signinPage(main) {
  const key = input('key', { type: 'password', autocomplete: 'current-password', required: true, spellcheck: 'false' });
  const slot = errorSlot();
  const btn = h('button', { type: 'submit', class: 'primary' }, 'Sign in');
  const form = h('form', { class: 'card narrow', 'aria-labelledby': 'signin-title' },
    h('h1', { id: 'signin-title', tabindex: '-1' }, 'Sign in'),
    h('p', {}, 'Paste an API key (ahk_…). It is kept in this browser tab only and forgotten when the tab closes.'),
    field('API key', key, 'scripts/run prints the first user\'s key; scripts/admin key create EMAIL makes more, as does the API keys page once you are in.'), slot, btn);
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    act(btn, slot, async () => {
      const k = key.value.trim();
      const me = await api('GET', '/users/me', { key: k, noRedirect: true });
      setKey(k);
      sessionStorage.setItem('agenthost.email', me.data.email || '');
      // Where the user was headed (a bookmarked #/usage), else the agents.
      const wanted = location.hash && location.hash !== '#/signin' ? location.hash : '#/agents';
      go(wanted);
    });
  });
  main.append(form);
  key.focus();
}

function nav(current) {
  const link = (href, label) => h('a', { href, 'aria-current': current === href ? 'page' : null }, label);
  const email = sessionStorage.getItem('agenthost.email');
  return h('nav', { class: 'topnav', 'aria-label': 'Main' },
    h('a', { href: '#/agents', class: 'brand' }, 'agenthost'),
    h('ul', {},
      h('li', {}, link('#/agents', 'Agents')), h('li', {}, link('#/files', 'Files')),
      h('li', {}, link('#/buckets', 'Buckets')), h('li', {}, link('#/usage', 'Usage')),
      h('li', {}, link('#/keys', 'API keys'))),
    h('span', { class: 'who' }, email || ''),
    h('button', { type: 'button', class: 'link', id: 'signout', onclick: signOut }, 'Sign out'));
}

function signOut() {
  dropKey();
  sessionStorage.removeItem('agenthost.email');
  go('#/signin', 'Signed out.', 'info');
}

function render() {
  const gen = ++generation;
  const path = location.hash.replace(/^#\/?/, '');
  const header = document.getElementById('header');
  const main = clear(document.getElementById('main'));
  clear(header);
  if (!getKey() || path === 'signin') {
    if (getKey()) { location.hash = '#/agents'; return; }
    document.title = 'Sign in · agenthost';
    signinPage(main);
    return;
  }
  for (const [re, page, title] of routes) {
    const m = path.match(re);
    if (!m) continue;
    header.append(nav(`#/${path.split('/')[0]}`));
    document.title = `${title} · agenthost`;
    const ctx = { alive: () => gen === generation };
    page(main, m.slice(1).map(decodeURIComponent), ctx);
    const h1 = main.querySelector('h1');
    if (h1 && document.activeElement === document.body) { h1.setAttribute('tabindex', '-1'); h1.focus(); }
    return;
  }
  location.hash = '#/agents';
}

setUnauthorizedHandler(() => {
  dropKey();
  go('#/signin', 'Your API key was not accepted (revoked or expired). Sign in again.', 'error');
});
window.addEventListener('hashchange', () => {
  if (!noticeSurvivesNavigation()) notice('');
  render();
});
window.addEventListener('offline', () => notice('You are offline: changes cannot be saved until the network is back.', 'error'));
window.addEventListener('online', () => notice('Back online.', 'info'));
render();
