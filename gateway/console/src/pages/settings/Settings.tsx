import { Empty, PageHeader } from '../../components/ui';

export default function Settings() {
  return (
    <>
      <PageHeader title="Settings" />
      <Empty title="Coming in stage 1" />
    </>
  );
}
